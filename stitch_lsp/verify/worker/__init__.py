"""The Verifier's worker side: load the reference and the candidate, check, time and police
them on the GPU. Only the verify worker process imports these modules."""
