"""The coordinator's HTTP surface: routes, dependencies, auth, middleware, the fast path and the OpenAPI prose."""
