# shellcheck shell=bash disable=SC2034
# kiwi/java:21: Debian 13's OpenJDK 21 (headless JDK) and Maven. Bookworm has
# no OpenJDK 21, so this image starts from the trixie base stage. No Gradle:
# trixie ships none (the gradle rows of the catalogue stay on kiwi/java:17).
NAME=java21
REF=kiwi/java:21
RUNTIME=java
VERSION=21
BASE=base-trixie
DESCRIPTION="Debian 13 openjdk-21-jdk-headless + maven 3.9"
APT_PACKAGES=(openjdk-21-jdk-headless maven)
DOWNLOADS=()
IMAGE_ENV=(JAVA_HOME=/usr/lib/jvm/java-21-openjdk-amd64)
CHECKS=(
  "java|^openjdk version \"21\.|java -version 2>&1"
  "javac|^javac 21\.|javac -version 2>&1"
  "mvn|^Apache Maven 3\.|mvn -B -v 2>&1"
  "release-21|^ok$|mkdir -p /tmp/j && cd /tmp/j && printf 'record P(int x) {}\npublic class M { public static void main(String[] a) { Object o = new P(1); if (o instanceof P(int x) && x == 1) System.out.println(\"ok\"); } }\n' >M.java && javac --release 21 -d . M.java && java -cp . M"
)
