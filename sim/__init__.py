"""A local, discrete-event Kubernetes + Metacontroller simulator that drives the real webhook."""
