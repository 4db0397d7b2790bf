-- A module for require_ok.lua (not a spec itself).
return { head_dims = { 64, 128 } }
