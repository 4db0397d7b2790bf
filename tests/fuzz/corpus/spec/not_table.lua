-- A spec must return a table.
return 42
