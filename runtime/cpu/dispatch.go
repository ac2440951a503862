package cpu

// maxDecodeRows is the most rows a job may have to use the decode kernels
// (see emit/avo.EmitDecode), in groups of 8: one pass per group over each
// whole key tile that every row keeps, its rows read in place.
const maxDecodeRows = 16

// decodeRows is the row count the decode kernels run for rows rows: the
// next power of two (a job of up to 8 rows runs one kernel of 1, 2, 4 or
// 8 rows, a larger one groups of 8 and a last padded group), the rows past
// the job's being zero queries whose results are not used.
func decodeRows(rows int) int {
	n := 1
	for n < rows {
		n *= 2
	}
	return n
}

type decodeKernel func(q *float32, k, v *byte, off *int, o, m, l *float32)

// decodeScoreKernel is a decode kernel with the score stage (scoreTile:
// rows[i] and slope[i] of its rows i, cols[j] of its keys j).
type decodeScoreKernel func(q *float32, k, v *byte, off *int, o, m, l *float32, sc *scoreTile)
