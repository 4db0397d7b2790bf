-- raises a table, not a string, on line 2
error({ code = 1 })
