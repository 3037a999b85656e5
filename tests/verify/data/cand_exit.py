# A candidate that takes the whole process down without a Python exception.
import os

os._exit(7)
