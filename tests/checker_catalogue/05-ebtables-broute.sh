# Issue 23 item 4: an ebtables-legacy broute DROP routes frames from the
# port itself instead of bridging them.
desc="ebtables-legacy -t broute -A BROUTING -i pcv1 -j DROP"
expect=hole
names='ebtables'
need() {
	command -v ebtables-legacy >/dev/null || { echo "no ebtables-legacy binary"; return 1; }
	gw ebtables-legacy -t broute -L >/dev/null 2>&1 ||
		{ echo "this kernel has no ebtables broute table"; return 1; }
}
apply() { gw ebtables-legacy -t broute -A BROUTING -i pcv1 -j DROP; }
revert() { gw ebtables-legacy -t broute -F 2>/dev/null || true; }
