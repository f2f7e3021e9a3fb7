"""Arena tasks (generation for battles, rating refits) run on the worker runtime."""
