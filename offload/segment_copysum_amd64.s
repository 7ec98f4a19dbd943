//go:build !purego

#include "textflag.h"

// func copySumAVX2(dst, src *byte, n int) uint64
//
// Copies n bytes (a positive multiple of 32, at most 1<<22) from src to dst
// and returns the unfolded sum of src read as little-endian 16-bit words,
// in one pass: every 32-byte vector loaded is stored and then split into
// the low and high halves of its eight dwords, which go into 32-bit lanes
// of four accumulators (at most 65536 iterations keep each lane below
// 2^32). Low and high halves weigh the same modulo 2^16-1.
TEXT ·copySumAVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	VPCMPEQD Y15, Y15, Y15
	VPSRLD $16, Y15, Y15
	CMPQ CX, $64
	JB tail32

copyloop:
	VMOVDQU (SI), Y4
	VMOVDQU 32(SI), Y5
	VMOVDQU Y4, (DI)
	VMOVDQU Y5, 32(DI)
	VPSRLD $16, Y4, Y6
	VPSRLD $16, Y5, Y7
	VPAND Y15, Y4, Y4
	VPAND Y15, Y5, Y5
	VPADDD Y4, Y0, Y0
	VPADDD Y5, Y1, Y1
	VPADDD Y6, Y2, Y2
	VPADDD Y7, Y3, Y3
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $64, CX
	CMPQ CX, $64
	JAE copyloop

tail32:
	// At most one 32-byte block is left.
	TESTQ CX, CX
	JZ reduce
	VMOVDQU (SI), Y4
	VMOVDQU Y4, (DI)
	VPSRLD $16, Y4, Y6
	VPAND Y15, Y4, Y4
	VPADDD Y4, Y0, Y0
	VPADDD Y6, Y2, Y2

reduce:

	// Add the four accumulators pairwise in 64-bit lanes (each dword
	// widened first), then the four qwords of the result.
	VPCMPEQD Y14, Y14, Y14
	VPSRLQ $32, Y14, Y14
	VPAND Y14, Y0, Y8
	VPSRLQ $32, Y0, Y0
	VPADDQ Y8, Y0, Y0
	VPAND Y14, Y1, Y8
	VPSRLQ $32, Y1, Y1
	VPADDQ Y8, Y1, Y1
	VPAND Y14, Y2, Y8
	VPSRLQ $32, Y2, Y2
	VPADDQ Y8, Y2, Y2
	VPAND Y14, Y3, Y8
	VPSRLQ $32, Y3, Y3
	VPADDQ Y8, Y3, Y3
	VPADDQ Y1, Y0, Y0
	VPADDQ Y3, Y2, Y2
	VPADDQ Y2, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPADDQ X1, X0, X0
	VPSRLDQ $8, X0, X1
	VPADDQ X1, X0, X0
	VZEROUPPER
	MOVQ X0, ret+24(FP)
	RET
