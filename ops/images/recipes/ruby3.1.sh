# shellcheck shell=bash disable=SC2034
# kiwi/ruby:3.1: Debian's ruby (3.1) and bundler, with the compiler and headers
# that gems with native extensions need.
NAME=ruby3.1
REF=kiwi/ruby:3.1
RUNTIME=ruby
VERSION=3.1
DESCRIPTION="Debian ruby 3.1 + bundler, ruby-dev and build tools"
APT_PACKAGES=(ruby ruby-dev ruby-bundler build-essential libyaml-dev zlib1g-dev libffi-dev libssl-dev)
DOWNLOADS=()
# Gems go to kiwi's home (bundle install runs as kiwi, not root).
IMAGE_ENV=(GEM_HOME=/home/kiwi/.gem
  PATH=/home/kiwi/.gem/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin)
CHECKS=(
  "ruby|^ruby 3\.1\.|ruby -v"
  "bundle|^Bundler version 2\.|bundle -v"
  "gem|^3\.|gem -v"
  "bundle-install|^Bundle complete|cd /tmp && printf 'source \"https://rubygems.org\"\n' >Gemfile && bundle install --local 2>&1 | grep -m1 '^Bundle complete'"
)
