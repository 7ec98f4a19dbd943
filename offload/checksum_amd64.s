//go:build !purego

#include "textflag.h"

// func sumAVX2(p *byte, n int) uint64
//
// Sums n bytes at p (n a positive multiple of 64, at most 1<<22) as
// little-endian 16-bit words and returns the plain (unfolded) sum. Each
// 32-byte load is split into the low and the high 16 bits of its eight
// dwords, which are added into 32-bit lanes of four accumulators; at most
// 65536 iterations keep every lane below 2^32. Both halves have the same
// weight because 2^16 ≡ 1 modulo 2^16-1.
TEXT ·sumAVX2(SB), NOSPLIT, $0-24
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	VPCMPEQD Y15, Y15, Y15
	VPSRLD $16, Y15, Y15 // 0x0000ffff in every dword

loop:
	VMOVDQU (SI), Y4
	VMOVDQU 32(SI), Y5
	VPSRLD $16, Y4, Y6
	VPSRLD $16, Y5, Y7
	VPAND Y15, Y4, Y4
	VPAND Y15, Y5, Y5
	VPADDD Y4, Y0, Y0
	VPADDD Y5, Y1, Y1
	VPADDD Y6, Y2, Y2
	VPADDD Y7, Y3, Y3
	ADDQ $64, SI
	SUBQ $64, CX
	JNZ loop

	// Widen every dword to a qword and add everything up: each qword lane
	// then holds at most eight values below 2^32.
	VPCMPEQD Y14, Y14, Y14
	VPSRLQ $32, Y14, Y14 // 0x00000000ffffffff in every qword
	VPSRLQ $32, Y0, Y4
	VPSRLQ $32, Y1, Y5
	VPSRLQ $32, Y2, Y6
	VPSRLQ $32, Y3, Y7
	VPAND Y14, Y0, Y0
	VPAND Y14, Y1, Y1
	VPAND Y14, Y2, Y2
	VPAND Y14, Y3, Y3
	VPADDQ Y4, Y0, Y0
	VPADDQ Y5, Y1, Y1
	VPADDQ Y6, Y2, Y2
	VPADDQ Y7, Y3, Y3
	VPADDQ Y1, Y0, Y0
	VPADDQ Y3, Y2, Y2
	VPADDQ Y2, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPADDQ X1, X0, X0
	VPSHUFD $0x4e, X0, X1
	VPADDQ X1, X0, X0
	VMOVQ X0, AX
	VZEROUPPER
	MOVQ AX, ret+16(FP)
	RET

// func cpuid(leaf, subleaf uint32) (a, b, c, d uint32)
TEXT ·cpuid(SB), NOSPLIT, $0-24
	MOVL leaf+0(FP), AX
	MOVL subleaf+4(FP), CX
	CPUID
	MOVL AX, a+8(FP)
	MOVL BX, b+12(FP)
	MOVL CX, c+16(FP)
	MOVL DX, d+20(FP)
	RET

// func xgetbv0() (eax, edx uint32)
TEXT ·xgetbv0(SB), NOSPLIT, $0-8
	MOVL $0, CX
	XGETBV
	MOVL AX, eax+0(FP)
	MOVL DX, edx+4(FP)
	RET
