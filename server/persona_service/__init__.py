"""Persona Service: a multi-tenant API for AI personas."""
