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

// func dotsInt8AVX2(q, base *int8, stride uintptr, n int, nodes []int32, out *int32)
// For each node of nodes, out[i] = the dot of q[:n] and the n codes at
// base + node*stride: dotInt8AVX2 over a walk's batch of neighbours in one
// call, so their loads overlap and no call is paid per node. n is a
// multiple of 32 above 0.
TEXT ·dotsInt8AVX2(SB), NOSPLIT, $0-64
	MOVQ q+0(FP), R8
	MOVQ base+8(FP), R9
	MOVQ stride+16(FP), DX
	MOVQ n+24(FP), R10
	MOVQ nodes_base+32(FP), R11
	MOVQ nodes_len+40(FP), R12
	MOVQ out+56(FP), R13

node4:
	CMPQ    R12, $0
	JLE     done4
	MOVLQSX (R11), AX
	IMULQ   DX, AX
	LEAQ    (R9)(AX*1), DI
	MOVQ    R8, SI
	MOVQ    R10, CX
	VPXOR   Y0, Y0, Y0
	VPXOR   Y1, Y1, Y1

loop4:
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
	JNZ       loop4

	VPADDD       Y1, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPADDD       X1, X0, X0
	VPSHUFD      $0x4E, X0, X1
	VPADDD       X1, X0, X0
	VPSHUFD      $0xB1, X0, X1
	VPADDD       X1, X0, X0
	VMOVD        X0, AX
	MOVL         AX, (R13)
	ADDQ         $4, R13
	ADDQ         $4, R11
	DECQ         R12
	JMP          node4

done4:
	VZEROUPPER
	RET

// func prefetch(base unsafe.Pointer, stride uintptr, lines int, nodes []int32)
// Asks the CPU to start fetching, for each node n, lines cache lines from
// base + n*stride; it waits for none of them (none when lines < 1).
TEXT ·prefetch(SB), NOSPLIT, $0-48
	MOVQ base+0(FP), SI
	MOVQ stride+8(FP), DX
	MOVQ lines+16(FP), R8
	MOVQ nodes_base+24(FP), DI
	MOVQ nodes_len+32(FP), CX
	CMPQ R8, $0
	JLE  out

node:
	CMPQ    CX, $0
	JLE     out
	MOVLQSX (DI), AX
	IMULQ   DX, AX
	ADDQ    SI, AX
	MOVQ    R8, BX

line:
	PREFETCHT0 (AX)
	ADDQ       $64, AX
	DECQ       BX
	JNZ        line
	ADDQ       $4, DI
	DECQ       CX
	JMP        node

out:
	RET

// func prefetchFrom(p unsafe.Pointer, lines int)
// The same for lines cache lines from p.
TEXT ·prefetchFrom(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), AX
	MOVQ lines+8(FP), BX
	CMPQ BX, $0
	JLE  done3

more:
	PREFETCHT0 (AX)
	ADDQ       $64, AX
	DECQ       BX
	JNZ        more

done3:
	RET
