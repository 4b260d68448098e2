/* A stand-in for PyTorch's libc10_cuda.so (ip_framework.c): only its name matters, which is how
 * the library tells that PyTorch is in the process. */
int ip_fake_c10_cuda(void);
int ip_fake_c10_cuda(void) {
    return 10;
}
