-- collectgarbage is removed
collectgarbage("count")
