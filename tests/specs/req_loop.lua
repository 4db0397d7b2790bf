-- A module for require_module_loop.lua.
while true do end
