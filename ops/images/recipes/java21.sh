# shellcheck shell=bash disable=SC2034
# kiwi/java:21: Debian 13's OpenJDK 21 (headless JDK) and Apache Maven 3.9.16
# as Maven Central serves it (the distribution CI runners and the official
# maven images carry), at /opt/maven. Bookworm has no OpenJDK 21, so this
# image starts from the trixie base stage. No Gradle: trixie ships none (the
# gradle rows of the catalogue stay on kiwi/java:17).
#
# Not Debian's maven package: it runs Maven 3.9.9 on Debian's own Sisu
# 0.3.5 (upstream 3.9 runs 0.9 and later), and a plugin built for Maven 3.9
# can fail to load in it: io.github.ascopes:protobuf-maven-plugin 5.1.7
# (google/gson's build) stops with Guice's NullInjectedIntoNonNullable for
# its own artifact resolver, with the network open, where Maven 3.9.16
# generates the sources. The sha512 is the one Maven Central publishes
# beside the file.
NAME=java21
REF=kiwi/java:21
RUNTIME=java
VERSION=21
BASE=base-trixie
DESCRIPTION="Debian 13 openjdk-21-jdk-headless + Apache Maven 3.9.16 (Maven Central)"
APT_PACKAGES=(openjdk-21-jdk-headless)
DOWNLOADS=(
  "apache-maven-3.9.16-bin.tar.gz 831a8591fe20c8243b1dbe7d71e3244f31d1665b0804b2e825e38cbbe5ce0cafb8338851f90780735568773e0a6cd07bbec107cda0b896b008b861075358b6f6 https://repo.maven.apache.org/maven2/org/apache/maven/apache-maven/3.9.16/apache-maven-3.9.16-bin.tar.gz"
)
IMAGE_ENV=(JAVA_HOME=/usr/lib/jvm/java-21-openjdk-amd64)
CHECKS=(
  "java|^openjdk version \"21\.|java -version 2>&1"
  "javac|^javac 21\.|javac -version 2>&1"
  "mvn|^Apache Maven 3\.9\.16 |mvn -B -v 2>&1"
  "mvn-home|^Maven home: /opt/maven$|mvn -B -v 2>&1 | grep '^Maven home'"
  "mvn-jansi|^ok$|[ -e /opt/maven/lib/jansi-native/Linux/x86_64/libjansi.so ] && mvn -v >/tmp/mvn-v.txt 2>&1 && ! grep -q 'Failed to load native library' /tmp/mvn-v.txt && echo ok"
  "release-21|^ok$|mkdir -p /tmp/j && cd /tmp/j && printf 'record P(int x) {}\npublic class M { public static void main(String[] a) { Object o = new P(1); if (o instanceof P(int x) && x == 1) System.out.println(\"ok\"); } }\n' >M.java && javac --release 21 -d . M.java && java -cp . M"
)
recipe_install() {
  in_root -- bash -euo pipefail -c '
    rm -rf /opt/maven && mkdir -p /opt/maven
    tar -xzf "/run/kiwi-downloads/$1" -C /opt/maven --strip-components=1 --no-same-owner
    ln -sf /opt/maven/bin/mvn /usr/bin/mvn
    # jansi (coloured output) finds its Linux library beside Maven, as it
    # does the Windows ones the distribution ships, instead of unpacking it
    # into /tmp, which a sandbox mounts noexec (a warning before every run)
    t=$(mktemp -d) && cd "$t"
    /usr/lib/jvm/java-21-openjdk-amd64/bin/jar xf /opt/maven/lib/jansi-*.jar org/fusesource/jansi/internal/native/Linux
    mv org/fusesource/jansi/internal/native/Linux /opt/maven/lib/jansi-native/Linux
    cd / && rm -rf "$t"
    /opt/maven/bin/mvn -v | head -1' maven-install apache-maven-3.9.16-bin.tar.gz
}
