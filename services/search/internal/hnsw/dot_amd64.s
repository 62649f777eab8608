#include "textflag.h"

// func dotInt8SSE41(a, b *int8, n int) int32
// n is a multiple of 16. Eight codes at a time are sign-extended to
// int16 (PMOVSXBW) and multiplied and summed in pairs into four int32
// lanes (PMADDWD); two accumulators, folded at the end.
TEXT ·dotInt8SSE41(SB), NOSPLIT, $0-28
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DI
	MOVQ n+16(FP), CX
	PXOR X0, X0
	PXOR X1, X1

loop:
	CMPQ CX, $0
	JLE  done
	PMOVSXBW (SI), X2
	PMOVSXBW (DI), X3
	PMADDWL  X3, X2
	PADDL    X2, X0
	PMOVSXBW 8(SI), X4
	PMOVSXBW 8(DI), X5
	PMADDWL  X5, X4
	PADDL    X4, X1
	ADDQ     $16, SI
	ADDQ     $16, DI
	SUBQ     $16, CX
	JMP      loop

done:
	PADDL  X1, X0
	PSHUFD $0x4E, X0, X1
	PADDL  X1, X0
	PSHUFD $0xB1, X0, X1
	PADDL  X1, X0
	MOVQ   X0, AX
	MOVL   AX, ret+24(FP)
	RET

// func dotInt8AVX2(a, b *int8, n int) int32
// n is a multiple of 32: sixteen codes at a time per VPMOVSXBW.
TEXT ·dotInt8AVX2(SB), NOSPLIT, $0-28
	MOVQ   a+0(FP), SI
	MOVQ   b+8(FP), DI
	MOVQ   n+16(FP), CX
	VPXOR  Y0, Y0, Y0
	VPXOR  Y1, Y1, Y1

loop2:
	CMPQ      CX, $0
	JLE       done2
	VPMOVSXBW (SI), Y2
	VPMOVSXBW (DI), Y3
	VPMADDWD  Y3, Y2, Y2
	VPADDD    Y2, Y0, Y0
	VPMOVSXBW 16(SI), Y4
	VPMOVSXBW 16(DI), Y5
	VPMADDWD  Y5, Y4, Y4
	VPADDD    Y4, Y1, Y1
	ADDQ      $32, SI
	ADDQ      $32, DI
	SUBQ      $32, CX
	JMP       loop2

done2:
	VPADDD       Y1, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPADDD       X1, X0, X0
	VPSHUFD      $0x4E, X0, X1
	VPADDD       X1, X0, X0
	VPSHUFD      $0xB1, X0, X1
	VPADDD       X1, X0, X0
	VMOVD        X0, AX
	VZEROUPPER
	MOVL         AX, ret+24(FP)
	RET
