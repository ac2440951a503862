// Command attngen compiles attention mask specs into fused kernels and
// analyses what a mask does: check validates a spec and prints its
// normalized mask, show draws the mask and its tile classes, reach prints
// the reachability coverage of a layer schedule. It holds only command-line
// handling; the logic lives in spec and verify.
package main
