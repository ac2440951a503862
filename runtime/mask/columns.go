package mask

// ColTile is one query tile that visits a key tile.
type ColTile struct {
	Q     int // query tile index: segment rows [Q*tileQ, (Q+1)*tileQ)
	Class Class
}

// Columns is the column-wise schedule of one segment, what a backward pass
// walks: for each key tile, the query tiles that may keep some pair of it,
// in increasing order, each with the class of the tile (the same tiles,
// classes and partial-tile keep words as the forward schedule: a tile is
// one (query tile, key tile) pair whichever way it is walked).
//
// It is derived from the row-wise schedule by a transposition (a counting
// sort of the forward visit lists, in time proportional to the tiles
// visited plus the key tiles), not from the closed-form query hull per key
// tile that a plan also holds (its qhull program, which gen's
// Plan.VisitColumn and GPU backward kernels walk). A Columns keeps its memory across Build calls, so a pooled one
// allocates nothing once it has grown to a call's size.
type Columns struct {
	start []int32   // the query tiles of key tile kt: tiles[start[kt]:start[kt+1]]
	tiles []ColTile //
	rows  []Tile    // scratch: the row-wise schedule
	rowAt []int32   // scratch: rows[rowAt[qt]:rowAt[qt+1]] for query tile qt
}

// Build fills c with the column-wise schedule of a segment with nq queries
// and nk keys (nq <= nk, queries bottom-right aligned: query row r is
// segment position r + nk - nq) in tiles of tileQ queries by tileK keys,
// from Visit of each query tile. Classes are Visit's (sound: a Partial
// tile may still hold no kept pair, which Refine tells).
func (c *Columns) Build(m Mask, nq, nk, tileQ, tileK int, d *Docs) {
	c.rows, c.rowAt = c.rows[:0], c.rowAt[:0]
	off := nk - nq
	for r0 := 0; r0 < nq; r0 += tileQ {
		c.rowAt = append(c.rowAt, int32(len(c.rows)))
		c.rows = Visit(m, c.rows, r0+off, min(r0+tileQ, nq)-1+off, nk, tileK, d)
	}
	c.rowAt = append(c.rowAt, int32(len(c.rows)))
	c.Transpose(c.rows, c.rowAt, (nk+tileK-1)/tileK)
}

// Transpose fills c from a row-wise schedule: rows[at[qt]:at[qt+1]] are
// the key tiles query tile qt visits, each below nkt, the key tiles of the
// segment. rows and at may be c's own scratch (Build passes them).
func (c *Columns) Transpose(rows []Tile, at []int32, nkt int) {
	if cap(c.start) < nkt+1 {
		c.start = make([]int32, nkt+1)
	}
	c.start = c.start[:nkt+1]
	clear(c.start)
	for _, t := range rows[:at[len(at)-1]] {
		c.start[t.K+1]++
	}
	for kt := 0; kt < nkt; kt++ {
		c.start[kt+1] += c.start[kt]
	}
	n := int(c.start[nkt])
	if cap(c.tiles) < n {
		c.tiles = make([]ColTile, n)
	}
	c.tiles = c.tiles[:n]
	// Fill in query tile order, so each column is increasing; start[kt]
	// walks to the end of column kt and is then shifted back.
	for qt := 0; qt+1 < len(at); qt++ {
		for _, t := range rows[at[qt]:at[qt+1]] {
			c.tiles[c.start[t.K]] = ColTile{Q: qt, Class: t.Class}
			c.start[t.K]++
		}
	}
	for kt := nkt; kt > 0; kt-- {
		c.start[kt] = c.start[kt-1]
	}
	c.start[0] = 0
}

// KeyTiles is the number of key tiles of the segment.
func (c *Columns) KeyTiles() int { return max(len(c.start)-1, 0) }

// Of returns the query tiles that visit key tile kt, in increasing order.
func (c *Columns) Of(kt int) []ColTile { return c.tiles[c.start[kt]:c.start[kt+1]] }

// QueryTiles is the number of query tiles of the schedule Build made.
func (c *Columns) QueryTiles() int { return max(len(c.rowAt)-1, 0) }

// Row returns the key tiles query tile qt visits (the forward schedule
// Build transposed), in increasing order; valid after Build only.
func (c *Columns) Row(qt int) []Tile { return c.rows[c.rowAt[qt]:c.rowAt[qt+1]] }

// Len is the number of tiles in the schedule.
func (c *Columns) Len() int { return len(c.tiles) }
