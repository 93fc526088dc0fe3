#!/usr/bin/perl
# Make the Markdown documents installed in one directory (DOCDIR) link only
# to what is installed: README.md and docs/*.md are written for the source
# tree ("docs/engine.md", "../tests/...", "spec/"), but the package puts them
# side by side in /usr/share/doc/portcullis. A relative link whose target
# exists next to the file stays; "docs/X" becomes "X" when X is installed;
# any other relative link becomes its plain text, with the source-tree path
# in parentheses when the text does not already say it.
# Usage: perl packaging/doclinks.pl DOCDIR
use strict;
use warnings;

my $dir = shift or die "usage: doclinks.pl DOCDIR\n";
opendir(my $dh, $dir) or die "$dir: $!\n";
my @md = grep { /\.md\z/ && -f "$dir/$_" } readdir($dh);
closedir($dh);

# Run from the top of the source tree: a name both at the top and in docs/
# (README.md: the project's, and the docs' index, which is not installed)
# names two documents, and only the top one is installed under it.
sub fix {
	my ($file, $text, $target) = @_;
	return "[$text]($target)" if $target =~ m{^(?:[a-z][a-z0-9+.-]*:|#)}i;
	my ($path, $frag) = $target =~ /^([^#]*)(#.*)?\z/;
	$frag //= '';
	# a document from docs/ naming a sibling the top of the tree also has
	my $shadowed = $file ne 'README.md' && $path !~ m{/} && -e "docs/$path" && -e $path;
	return "[$text]($target)" if $path ne '' && -e "$dir/$path" && !$shadowed;
	(my $flat = $path) =~ s{^(?:\./)?docs/}{};
	return "[$text]($flat$frag)"
	    if $flat ne $path && $flat ne '' && -e "$dir/$flat" && !-e $flat;
	return $text if index($text, $path) >= 0 || $text =~ /^`.*`\z/;
	return "$text (source tree: $path)";
}

for my $f (@md) {
	my $p = "$dir/$f";
	open(my $in, '<', $p) or die "$p: $!\n";
	local $/;
	my $s = <$in>;
	close($in);
	my $out = '';
	# links outside code: fenced blocks and inline code are left alone
	for my $part (split /(^```.*?^```[^\n]*\n)/ms, $s) {
		if ($part =~ /^```/) {
			$out .= $part;
			next;
		}
		$part =~ s{(`[^`\n]*`)|\[([^\]\n]+)\]\(([^)\s]+)\)}{defined $1 ? $1 : fix($f, $2, $3)}ge;
		$out .= $part;
	}
	next if $out eq $s;
	open(my $o, '>', "$p.tmp") or die "$p.tmp: $!\n";
	print $o $out;
	close($o) or die "$p.tmp: $!\n";
	rename("$p.tmp", $p) or die "$p: $!\n";
}
