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
