"""The process assembly: running the service. The App, the gRPC server, the runner, the local stack and its
supervisor, the edge. It sits over the providers (which it builds) and the kernel, beside the domains, which
never import it: what a module declares and is handed (Module, ServicerDeps, Runtime) is the kernel's
(kernel.module, kernel.resources), so the kernel never reaches up here."""
