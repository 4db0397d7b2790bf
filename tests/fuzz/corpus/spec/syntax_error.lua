return {
  name = "syntax",
  template = = "x",
}
