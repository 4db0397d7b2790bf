-- the os library is not opened
os.execute("true")
