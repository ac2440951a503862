package spec

// VisitTiles appends mk(tile, class) for each key tile of width tileK that
// query positions [q0, q1] meet with some kept pair, in increasing order,
// for a sequence of nk keys (one document). It enumerates only the key tiles
// inside the key spans and classifies each with Classify, refined by
// ClassifyExact when a combined mask answers Partial, so no empty tile is
// ever returned and its cost is proportional to the tiles returned. spans
// is scratch and is returned for reuse.
func VisitTiles[T any](p Pattern, dst []T, q0, q1, nk, tileK int, spans []Span, mk func(int, Class) T) ([]T, []Span) {
	spans = p.KeySpans(spans[:0], q0, q1, nk)
	exact := p.Exact()
	last := -1
	for _, s := range spans {
		for kt := max(s.Lo/tileK, last+1); kt <= s.Hi/tileK; kt++ {
			k0 := kt * tileK
			k1 := min(k0+tileK, nk) - 1
			c := p.Classify(q0, q1, k0, k1)
			if c == Partial && !exact {
				c = p.ClassifyExact(q0, q1, k0, k1)
			}
			if c != Empty {
				dst = append(dst, mk(kt, c))
			}
			last = kt
		}
	}
	return dst, spans
}

// VisitTilesDocs is VisitTiles on a packed sequence: keys from the start of
// q0's document to q1 (causal) or to the end of q1's document, classified
// with ClassifyDocs (a tile that spans documents may be Partial although it
// keeps nothing).
func VisitTilesDocs[T any](p Pattern, dst []T, q0, q1, nk, tileK int, docs *Docs, mk func(int, Class) T) []T {
	lo, hi := docs.Start(q0), q1
	if !p.Causal {
		hi = docs.End(q1)
	}
	for kt := lo / tileK; kt <= min(hi, nk-1)/tileK; kt++ {
		k0 := kt * tileK
		k1 := min(k0+tileK, nk) - 1
		if c := p.ClassifyDocs(q0, q1, k0, k1, docs); c != Empty {
			dst = append(dst, mk(kt, c))
		}
	}
	return dst
}
