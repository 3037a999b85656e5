# A candidate that leaves a child process behind and then hangs.
import subprocess
import sys
import time

CHILD = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
with open(__file__ + ".child.pid", "w") as f:
    f.write(str(CHILD.pid))
time.sleep(3600)
