-- dofile is removed
dofile("x")
