"""Transport: gRPC servicers (proto ⇄ domain) and the request pipeline that
gives every declared RPC auth, validation, a unit of work and errors."""
