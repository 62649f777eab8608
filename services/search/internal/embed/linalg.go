package embed

import (
	"errors"
	"math"
	"runtime"
	"sync"

	"gonum.org/v1/gonum/mat"
)

// csr is a sparse row-major matrix.
type csr struct {
	rows, cols int
	ptr        []int
	idx        []int32
	val        []float64
}

// transpose returns the CSR of the transpose (i.e. the CSC of m).
func (m *csr) transpose() *csr {
	t := &csr{rows: m.cols, cols: m.rows, ptr: make([]int, m.cols+1), idx: make([]int32, len(m.idx)), val: make([]float64, len(m.val))}
	for _, j := range m.idx {
		t.ptr[j+1]++
	}
	for j := 0; j < m.cols; j++ {
		t.ptr[j+1] += t.ptr[j]
	}
	next := append([]int(nil), t.ptr[:m.cols]...)
	for i := 0; i < m.rows; i++ {
		for p := m.ptr[i]; p < m.ptr[i+1]; p++ {
			j := m.idx[p]
			q := next[j]
			t.idx[q] = int32(i)
			t.val[q] = m.val[p]
			next[j]++
		}
	}
	return t
}

// mulDense computes out = m * d (d is m.cols x l, row-major), in parallel
// over row blocks. Each output row is summed by one goroutine in a fixed
// order, so results are bit-for-bit deterministic.
func (m *csr) mulDense(d *mat.Dense) *mat.Dense {
	_, l := d.Dims()
	out := mat.NewDense(m.rows, l, nil)
	draw := d.RawMatrix()
	oraw := out.RawMatrix()
	parallelRange(m.rows, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			row := oraw.Data[i*oraw.Stride : i*oraw.Stride+l]
			for p := m.ptr[i]; p < m.ptr[i+1]; p++ {
				v := m.val[p]
				src := draw.Data[int(m.idx[p])*draw.Stride : int(m.idx[p])*draw.Stride+l]
				for c, x := range src {
					row[c] += v * x
				}
			}
		}
	})
	return out
}

func parallelRange(n int, fn func(lo, hi int)) {
	workers := runtime.GOMAXPROCS(0)
	if workers > n {
		workers = max(n, 1)
	}
	step := (n + workers - 1) / workers
	var wg sync.WaitGroup
	for lo := 0; lo < n; lo += step {
		hi := min(lo+step, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(lo, hi)
		}()
	}
	wg.Wait()
}

// orthonormalize returns an orthonormal basis of the column space of y via
// the eigen-decomposition of the small Gram matrix y^T y (l x l): with
// y^T y = W L W^T, Q = y W L^{-1/2}. Applied twice (like CholeskyQR2) to
// recover the orthogonality lost to squaring the condition number.
// Directions with negligible energy are dropped.
func orthonormalize(y *mat.Dense) (*mat.Dense, error) {
	q := y
	for pass := 0; pass < 2; pass++ {
		var g mat.SymDense
		g.SymOuterK(1, q.T())
		var eig mat.EigenSym
		if !eig.Factorize(&g, true) {
			return nil, errors.New("eigendecomposition of gram matrix failed")
		}
		vals := eig.Values(nil)
		var w mat.Dense
		eig.VectorsTo(&w)
		maxv := 0.0
		for _, v := range vals {
			maxv = math.Max(maxv, v)
		}
		keep := []int{}
		for i := len(vals) - 1; i >= 0; i-- { // descending
			if vals[i] > maxv*1e-12 {
				keep = append(keep, i)
			}
		}
		if len(keep) == 0 {
			return nil, errors.New("matrix has no energy")
		}
		r, _ := w.Dims()
		wk := mat.NewDense(r, len(keep), nil)
		for c, i := range keep {
			s := 1 / math.Sqrt(vals[i])
			for row := 0; row < r; row++ {
				wk.Set(row, c, w.At(row, i)*s)
			}
		}
		var next mat.Dense
		next.Mul(q, wk)
		q = &next
	}
	return q, nil
}

// randomizedSVD returns the top-k right singular vectors (cols x k) and
// singular values of the sparse matrix x (Halko, Martinsson & Tropp 2011):
// a Gaussian sketch with oversampling, a few power iterations, then an
// exact SVD of the small projected matrix via its l x l Gram matrix.
func randomizedSVD(x *csr, k, oversample, powerIters int, seed uint64) (*mat.Dense, []float64, error) {
	xt := x.transpose()
	l := min(k+oversample, min(x.rows, x.cols))
	if l < k {
		k = l
	}
	omega := mat.NewDense(x.cols, l, nil)
	rng := newGaussian(seed)
	raw := omega.RawMatrix()
	for i := range raw.Data {
		raw.Data[i] = rng.next()
	}
	y := x.mulDense(omega) // rows x l
	q, err := orthonormalize(y)
	if err != nil {
		return nil, nil, err
	}
	for it := 0; it < powerIters; it++ {
		z, err := orthonormalize(xt.mulDense(q)) // cols x l
		if err != nil {
			return nil, nil, err
		}
		if q, err = orthonormalize(x.mulDense(z)); err != nil {
			return nil, nil, err
		}
	}
	// B^T = X^T Q (cols x l'). B B^T = Q^T X X^T Q = (B^T)^T B^T.
	bt := xt.mulDense(q)
	var g mat.SymDense
	g.SymOuterK(1, bt.T())
	var eig mat.EigenSym
	if !eig.Factorize(&g, true) {
		return nil, nil, errors.New("eigendecomposition of projected matrix failed")
	}
	vals := eig.Values(nil)
	var w mat.Dense
	eig.VectorsTo(&w)
	_, lq := q.Dims()
	k = min(k, lq)
	// Right singular vectors: V = B^T U_B Sigma^{-1}, top k (eigenvalues
	// come ascending).
	cols, _ := bt.Dims()
	v := mat.NewDense(cols, k, nil)
	sig := make([]float64, k)
	for c := 0; c < k; c++ {
		i := lq - 1 - c
		s := math.Sqrt(math.Max(vals[i], 0))
		sig[c] = s
		if s == 0 {
			continue
		}
		col := mat.NewVecDense(lq, nil)
		for r := 0; r < lq; r++ {
			col.SetVec(r, w.At(r, i)/s)
		}
		var vc mat.VecDense
		vc.MulVec(bt, col)
		// Fix the sign so the largest-magnitude entry is positive: SVD
		// vectors are defined up to sign and this keeps output canonical.
		big, bigAbs := 0.0, -1.0
		for r := 0; r < cols; r++ {
			if a := math.Abs(vc.AtVec(r)); a > bigAbs {
				big, bigAbs = vc.AtVec(r), a
			}
		}
		sign := 1.0
		if big < 0 {
			sign = -1
		}
		for r := 0; r < cols; r++ {
			v.Set(r, c, sign*vc.AtVec(r))
		}
	}
	return v, sig, nil
}

// gaussian is a small deterministic normal generator (SplitMix64 +
// Box-Muller) so the model bytes do not depend on math/rand internals.
type gaussian struct {
	state uint64
	spare float64
	has   bool
}

func newGaussian(seed uint64) *gaussian { return &gaussian{state: seed} }

func (g *gaussian) u64() uint64 {
	g.state += 0x9e3779b97f4a7c15
	z := g.state
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func (g *gaussian) uniform() float64 {
	return (float64(g.u64()>>11) + 0.5) / (1 << 53)
}

func (g *gaussian) next() float64 {
	if g.has {
		g.has = false
		return g.spare
	}
	u1, u2 := g.uniform(), g.uniform()
	r := math.Sqrt(-2 * math.Log(u1))
	g.spare = r * math.Sin(2*math.Pi*u2)
	g.has = true
	return r * math.Cos(2*math.Pi*u2)
}
