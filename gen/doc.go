// Package gen owns the Plan: tile sizes, the tile schedule (which key tiles
// each query tile visits, full or partial), the partial-tile predicate as a
// small integer IR, and layout transforms (dilated masks gathered by residue
// class); and the generated Go packages (PackageFiles: the API file plus
// copies of the runtime sources they carry). Later it will also own GPU
// launch geometry. It never imports an emitter (a test enforces it).
//
// Compile runs the declared Pipeline of passes (layout, tiles, predicate).
// The schedule of a call is not stored: Visit lists the key tiles of one
// query tile from the mask's key spans and tile classification, in time
// proportional to the tiles it returns (plus at most one boundary tile per
// span), so it stays usable at a million positions. Tiles that Classify
// calls partial for a union or intersection are re-classified exactly by
// counting (spec.Pattern.ClassifyExact), so no empty tile is ever visited.
// A Plan prints as text (Text) and parses back (ParseText).
package gen
