-- A module for require_module_error.lua.
error("this module is broken")
