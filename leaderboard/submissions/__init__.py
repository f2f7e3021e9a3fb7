"""Submissions: the upload form, checkpoint checks, storing and hashing weights, states while a worker runs them."""
