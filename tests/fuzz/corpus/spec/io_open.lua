-- the io library is not opened
local f = io.open("/etc/passwd")
