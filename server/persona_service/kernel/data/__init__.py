"""The kernel's data access: engine, unit of work, tables, the migrations runner, the kernel's
repositories and personal-data exports. Imports neither transport nor process."""
