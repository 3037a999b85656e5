# A candidate that never finishes importing.
import time

time.sleep(3600)
