# What `make install` lays out besides the four binaries (which the top
# Makefile installs in $(PREFIX)/sbin): configuration, systemd units,
# tmpfiles and logrotate snippets, man pages, documentation and examples.
# The Debian package is exactly this tree (debian/rules runs make install).
#
# Run from the top of the tree: make -f packaging/install.mk DESTDIR=... PREFIX=...
# Files under /etc are never overwritten when they already exist, so
# `make install` on a configured box keeps the admin's edits.

DESTDIR     ?=
PREFIX      ?= /usr
SYSCONFDIR  ?= /etc
# Debian 12 keeps units in /lib (usrmerge is not final there).
UNITDIR     ?= /lib/systemd/system
TMPFILESDIR ?= $(PREFIX)/lib/tmpfiles.d
MANDIR      ?= $(PREFIX)/share/man
DOCDIR      ?= $(PREFIX)/share/doc/portcullis

# Data files only: plain install (dh passes INSTALL with strip options meant for binaries).
INSTALL_DATA := install

# The configuration and example policy the rules module documents, when
# present; otherwise the package's own.
CONF_SRC  := $(firstword $(wildcard docs/examples/portcullis.yaml) packaging/conf/portcullis.yaml)
RULES_SRC := $(firstword $(wildcard docs/examples/rules.d/agent-1.yaml) packaging/conf/agent-1.yaml)

MAN5  := $(wildcard docs/man/*.5)
MAN8  := $(wildcard docs/man/*.8)
UNITS := $(wildcard packaging/systemd/*.service)
# Every admin document except the index of the source tree's docs/.
DOCS  := README.md $(filter-out docs/README.md docs/lab.md docs/layout.md,$(wildcard docs/*.md))
SIEM  := $(wildcard packaging/siem/*)

.PHONY: install-extra
install-extra:
	$(INSTALL_DATA) -d -m 0755 $(DESTDIR)$(SYSCONFDIR)/portcullis/rules.d \
		$(DESTDIR)$(SYSCONFDIR)/logrotate.d $(DESTDIR)$(UNITDIR) \
		$(DESTDIR)$(TMPFILESDIR) $(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man8 \
		$(DESTDIR)$(DOCDIR)/examples/rules.d $(DESTDIR)$(DOCDIR)/examples/siem
	@set -e; for f in $(CONF_SRC):portcullis/portcullis.yaml \
		$(RULES_SRC):portcullis/rules.d/agent-1.yaml.example \
		packaging/logrotate/portcullis:logrotate.d/portcullis \
		packaging/logrotate/portcullis-syslog:logrotate.d/portcullis-syslog; do \
		src=$${f%%:*} dst=$(DESTDIR)$(SYSCONFDIR)/$${f#*:}; \
		if [ -e "$$dst" ]; then echo "install: keeping existing $$dst"; \
		else echo "$(INSTALL_DATA) -m 0644 $$src $$dst"; $(INSTALL_DATA) -m 0644 "$$src" "$$dst"; fi; \
	done
	$(INSTALL_DATA) -m 0644 $(UNITS) $(DESTDIR)$(UNITDIR)/
	$(INSTALL_DATA) -m 0644 packaging/tmpfiles/portcullis.conf $(DESTDIR)$(TMPFILESDIR)/portcullis.conf
	$(if $(MAN5),$(INSTALL_DATA) -m 0644 $(MAN5) $(DESTDIR)$(MANDIR)/man5/)
	$(if $(MAN8),$(INSTALL_DATA) -m 0644 $(MAN8) $(DESTDIR)$(MANDIR)/man8/)
	$(INSTALL_DATA) -m 0644 $(DOCS) $(DESTDIR)$(DOCDIR)/
	$(INSTALL_DATA) -m 0644 $(CONF_SRC) $(DESTDIR)$(DOCDIR)/examples/portcullis.yaml
	$(INSTALL_DATA) -m 0644 $(RULES_SRC) $(DESTDIR)$(DOCDIR)/examples/rules.d/agent-1.yaml
	$(if $(SIEM),$(INSTALL_DATA) -m 0644 $(SIEM) $(DESTDIR)$(DOCDIR)/examples/siem/)
	# links into the source tree become text: no dangling link installed
	perl packaging/doclinks.pl $(DESTDIR)$(DOCDIR)

.DEFAULT_GOAL := install-extra
