# A candidate that fails as soon as it is imported.
raise RuntimeError("deliberate failure while importing the candidate")
