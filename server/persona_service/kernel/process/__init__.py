"""Running the service: the App, the gRPC server, the local stack and its supervisor, the
embedded engines, the edge, module assembly and the resources a process owns."""
