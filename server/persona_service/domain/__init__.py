"""Domain services: the rules. They raise `ApiError`s, never import grpc and
never commit (the request pipeline owns the unit of work)."""
