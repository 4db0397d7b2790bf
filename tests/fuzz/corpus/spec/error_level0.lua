-- error with level 0 carries no position; the sandbox adds line 2
error("plain message", 0)
