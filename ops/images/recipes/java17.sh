# shellcheck shell=bash disable=SC2034
# kiwi/java:17: Debian's OpenJDK 17 (headless JDK), Maven and Gradle.
NAME=java17
REF=kiwi/java:17
RUNTIME=java
VERSION=17
DESCRIPTION="Debian openjdk-17-jdk-headless + maven 3.8, gradle 4.4"
APT_PACKAGES=(openjdk-17-jdk-headless maven gradle)
DOWNLOADS=()
IMAGE_ENV=(JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64)
CHECKS=(
  "java|^openjdk version \"17\.|java -version 2>&1"
  "javac|^javac 17\.|javac -version 2>&1"
  "mvn|^Apache Maven 3\.|mvn -B -v 2>&1"
  "gradle|^Gradle [0-9]|gradle -v 2>&1 | grep -m1 '^Gradle'"
  "gradle-build|^ok$|mkdir -p /tmp/g/src/main/java && cd /tmp/g && echo 'apply plugin: \"java\"' >build.gradle && echo 'public class Hello {}' >src/main/java/Hello.java && gradle --offline --no-daemon -q build >log 2>&1 && test -f build/libs/g.jar && echo ok"
)
