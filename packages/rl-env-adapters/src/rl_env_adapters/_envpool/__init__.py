"""The EnvPool backend: spec conversion and the multithreaded env."""
