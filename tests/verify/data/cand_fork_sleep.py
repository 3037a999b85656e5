# A candidate that leaves a child process behind and then hangs.
import os
import subprocess
import sys
import time

CHILD = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
with open(os.environ["STITCH_TEST_PID_FILE"], "w") as f:
    f.write(str(CHILD.pid))
time.sleep(3600)
