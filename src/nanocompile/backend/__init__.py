"""Backend: build generated C into shared libraries and plan the memory kernels run in."""
