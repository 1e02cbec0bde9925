"""Running the service: the App, the gRPC server, the local stack and its supervisor, the edge. What a
module declares, the resources a process owns and the embedded PostgreSQL are the kernel's own
(kernel.module, kernel.resources, kernel.data.embedded)."""
