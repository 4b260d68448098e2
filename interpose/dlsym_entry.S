/* dlsym, interposed at both glibc versions that programs bind to.
 *
 * The entry asks ho_dlsym_route() whether the name is a driver entry point to hook. If not, it
 * jumps (does not call) to the real dlsym with the caller's arguments and return address intact:
 * glibc resolves RTLD_NEXT relative to the return address, so a tail jump is the only way for a
 * pass-through dlsym(RTLD_NEXT, ...) to keep meaning "after the caller". The route itself takes
 * no lock, allocates nothing and logs nothing for names that are not cu[A-Z]*. */

#if defined(__x86_64__)

    .text
    .p2align 4
    .type ho_dlsym_entry, @function
ho_dlsym_entry:
    .cfi_startproc
    pushq %rdi
    .cfi_adjust_cfa_offset 8
    pushq %rsi
    .cfi_adjust_cfa_offset 8
    subq $8, %rsp                 /* keep the stack 16-byte aligned for the call */
    .cfi_adjust_cfa_offset 8
    call ho_dlsym_route
    addq $8, %rsp
    .cfi_adjust_cfa_offset -8
    popq %rsi
    .cfi_adjust_cfa_offset -8
    popq %rdi
    .cfi_adjust_cfa_offset -8
    testq %rax, %rax
    jz 1f
    ret                           /* a hook */
1:  jmp *ho_real_dlsym(%rip)      /* pass through, as if the caller had called it */
    .cfi_endproc
    .size ho_dlsym_entry, .-ho_dlsym_entry

#elif defined(__aarch64__)

    .text
    .p2align 4
    .type ho_dlsym_entry, %function
ho_dlsym_entry:
    .cfi_startproc
    stp x29, x30, [sp, #-32]!
    .cfi_def_cfa_offset 32
    .cfi_offset 29, -32
    .cfi_offset 30, -24
    mov x29, sp
    stp x0, x1, [sp, #16]
    bl ho_dlsym_route
    mov x16, x0
    ldp x0, x1, [sp, #16]
    ldp x29, x30, [sp], #32
    .cfi_def_cfa_offset 0
    cbz x16, 1f
    mov x0, x16
    ret
1:  adrp x16, ho_real_dlsym
    ldr x16, [x16, :lo12:ho_real_dlsym]
    br x16
    .cfi_endproc
    .size ho_dlsym_entry, .-ho_dlsym_entry

#else
#error "hostoff's dlsym entry supports x86-64 and aarch64"
#endif

/* Both exported versions are the same entry: glibc's are the same function too. */
    .globl ho_dlsym_base
    .set ho_dlsym_base, ho_dlsym_entry
    .globl ho_dlsym_new
    .set ho_dlsym_new, ho_dlsym_entry
#if defined(__x86_64__)
    .symver ho_dlsym_base, dlsym@GLIBC_2.2.5
#else
    .symver ho_dlsym_base, dlsym@GLIBC_2.17
#endif
    .symver ho_dlsym_new, dlsym@@GLIBC_2.34

    .section .note.GNU-stack,"",%progbits
