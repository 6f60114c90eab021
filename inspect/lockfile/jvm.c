/*
 * jvm.c: the Maven and Gradle install planners of the runtime
 * table (dependencies resolved, a warm-up build, then offline), and the
 * Java trust store program Phase A runs for them (see lockfile.h,
 * docs/inspection.md).
 */
#include "inspect/lockfile/lockfile.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "inspect/image/image.h"
#include "inspect/runtime.h"

static const char *const java_trust_source =
    "// KiwiTrust.java: a Java trust store (PKCS12, password changeit) of the JDK's own certificates and every\n"
    "// certificate of a PEM bundle (when the bundle exists). Usage: java KiwiTrust.java BUNDLE.pem OUT.p12\n"
    "// The same program Kiwi's install step runs for Maven and Gradle (inspect/lockfile/lockfile.c, kiwi_java_trust_source).\n"
    "import java.io.*; import java.nio.file.*; import java.security.KeyStore; import java.security.cert.*;\n"
    "public class KiwiTrust { public static void main(String[] a) throws Exception {\n"
    "  KeyStore ks = KeyStore.getInstance(\"PKCS12\"); ks.load(null, null);\n"
    "  Path def = Paths.get(System.getProperty(\"java.home\"), \"lib\", \"security\", \"cacerts\");\n"
    "  if (Files.exists(def)) { KeyStore d = KeyStore.getInstance(KeyStore.getDefaultType());\n"
    "    try (InputStream in = Files.newInputStream(def)) { d.load(in, \"changeit\".toCharArray()); }\n"
    "    for (String al : java.util.Collections.list(d.aliases())) if (d.isCertificateEntry(al)) ks.setCertificateEntry(al, d.getCertificate(al)); }\n"
    "  int i = 0; Path bundle = Paths.get(a[0]);\n"
    "  if (Files.isRegularFile(bundle)) try (InputStream in = Files.newInputStream(bundle)) {\n"
    "    for (Certificate c : CertificateFactory.getInstance(\"X.509\").generateCertificates(in)) ks.setCertificateEntry(\"kiwi-ca-\" + (i++), c); }\n"
    "  Files.createDirectories(Paths.get(a[1]).toAbsolutePath().getParent());\n"
    "  try (OutputStream out = new FileOutputStream(a[1])) { ks.store(out, \"changeit\".toCharArray()); } } }\n"
    ;

const char *
kiwi_java_trust_source (void)
{
    return java_trust_source;
}


/* ------------------------------------------------------- Maven, Gradle */

/* Adds a Maven or Gradle step whose script is the trust store's making
 * (KiwiTrust.java run on the CA bundle) followed by the printf-formatted
 * body. */
static int
add_jvm_step (kiwi__steps *s, kiwi_ecosystem eco, const char *dir, const char *summary, const char *why,
              kiwi_error_t *err, const char *fmt, ...) __attribute__ ((format (printf, 7, 8)));

static int
add_jvm_step (kiwi__steps *s, kiwi_ecosystem eco, const char *dir, const char *summary, const char *why,
              kiwi_error_t *err, const char *fmt, ...)
{
    cleanup_free char *body = NULL, *script = NULL;
    va_list ap;
    va_start (ap, fmt);
    int n = vasprintf (&body, fmt, ap);
    va_end (ap);
    if (n < 0) {
        body = NULL;
        return kiwi_error_make (err, ENOMEM, "install plan");
    }
    if (asprintf (&script,
                  "mkdir -p " KIWI__SCRATCH " && cat > " KIWI__SCRATCH
                  "/KiwiTrust.java <<'KIWI_JAVA_EOF'\n%sKIWI_JAVA_EOF\n"
                  "java " KIWI__SCRATCH "/KiwiTrust.java /kiwi/ca/ca-certificates.crt " KIWI__TRUSTSTORE "\n%s",
                  java_trust_source, body)
        < 0) {
        script = NULL;
        return kiwi_error_make (err, ENOMEM, "install plan");
    }
    return kiwi__add_step (s, eco, dir, false, summary, script, why, err);
}

/* The artifacts a build's plugins declare: their own dependencies (a
 * Surefire provider named beside the plugin, junit4's surefire-junit47) and
 * an artifact a plugin's configuration names (animal-sniffer's API
 * <signature>; a protobuf plugin's protoc and protoc plugins, executables
 * for the sandbox's platform: ascopes' <protoc>VERSION</protoc> and
 * <binaryMavenPlugins>, xolstice's <protocArtifact>/<pluginArtifact>
 * G:A:V:TYPE:CLASSIFIER). go-offline leaves them out, a protobuf plugin
 * fetches protoc only when there are .proto files (Phase A has none), and the warm-up resolves them
 * only when the plugin needs them with Phase A's stub tests, which a
 * plugin's <includes> may skip, or which give it no classes to check. A
 * program run on the effective POM writes them as a POM's dependencies,
 * which Maven then resolves. */
static const char *const maven_plugin_deps_source =
    "// KiwiPluginDeps.java: the artifacts a build's plugins declare (<build><plugins><plugin><dependencies>, and\n"
    "// an artifact named in a plugin's <configuration>, as animal-sniffer's <signature>) of each project of an\n"
    "// effective POM, as the dependencies of a POM of their own.\n"
    "// Usage: java KiwiPluginDeps.java EFFECTIVE-POM.xml OUT-POM.xml (OUT is written only when there are any)\n"
    "import java.io.*; import java.nio.file.*; import java.util.*; import javax.xml.parsers.*; import org.w3c.dom.*;\n"
    "public class KiwiPluginDeps {\n"
    "  static String text(Element e, String tag) { for (Node n = e.getFirstChild(); n != null; n = n.getNextSibling())\n"
    "      if (n instanceof Element && ((Element) n).getTagName().equals(tag)) return n.getTextContent().trim(); return \"\"; }\n"
    "  static String tag(Node n) { return n instanceof Element ? ((Element) n).getTagName() : \"\"; }\n"
    "  static boolean under(Node n, String... tags) { for (String t : tags) { n = n.getParentNode();\n"
    "      if (!tag(n).equals(t)) return false; } return true; }\n"
    "  // a <configuration> of a plugin of <build><plugins>, directly or in one of its executions\n"
    "  static boolean configured(Node n) { for (n = n.getParentNode(); n != null && !tag(n).equals(\"configuration\"); n = n.getParentNode())\n"
    "      if (tag(n).equals(\"plugin\") || tag(n).equals(\"project\")) return false;\n"
    "    if (n == null) return false;\n"
    "    if (under(n, \"execution\", \"executions\")) { n = n.getParentNode().getParentNode(); }\n"
    "    return under(n, \"plugin\", \"plugins\", \"build\", \"project\"); }\n"
    "  static String esc(String s) { return s.replace(\"&\", \"&amp;\").replace(\"<\", \"&lt;\").replace(\">\", \"&gt;\"); }\n"
    "  // protoc's classifier for this machine (os-maven-plugin's os.detected.classifier)\n"
    "  static String platform() { String a = System.getProperty(\"os.arch\");\n"
    "    return \"linux-\" + (a.equals(\"amd64\") ? \"x86_64\" : a.equals(\"aarch64\") ? \"aarch_64\" : a); }\n"
    "  static Set<String> seen = new LinkedHashSet<>(); static StringBuilder deps = new StringBuilder();\n"
    "  static void add(String g, String art, String v, String t, String c) {\n"
    "    if (g.isEmpty() || art.isEmpty() || v.isEmpty() || (g + art + v + t + c).contains(\"${\")\n"
    "        || !seen.add(g + \":\" + art + \":\" + v + \":\" + t + \":\" + c)) return;\n"
    "    deps.append(\"<dependency><groupId>\").append(esc(g)).append(\"</groupId><artifactId>\").append(esc(art))\n"
    "        .append(\"</artifactId><version>\").append(esc(v)).append(\"</version>\")\n"
    "        .append(t.isEmpty() ? \"\" : \"<type>\" + esc(t) + \"</type>\").append(c.isEmpty() ? \"\" : \"<classifier>\" + esc(c) + \"</classifier>\")\n"
    "        .append(\"</dependency>\\n\"); }\n"
    "  public static void main(String[] a) throws Exception {\n"
    "    DocumentBuilderFactory f = DocumentBuilderFactory.newInstance();\n"
    "    f.setFeature(\"http://apache.org/xml/features/disallow-doctype-decl\", true);\n"
    "    f.setExpandEntityReferences(false);\n"
    "    Document d = f.newDocumentBuilder().parse(new File(a[0]));\n"
    "    NodeList l = d.getElementsByTagName(\"*\");\n"
    "    for (int i = 0; i < l.getLength(); i++) { Element e = (Element) l.item(i); String name = e.getTagName();\n"
    "      String g = text(e, \"groupId\"), art = text(e, \"artifactId\"), v = text(e, \"version\"), t = text(e, \"type\"), c = text(e, \"classifier\");\n"
    "      boolean dep = name.equals(\"dependency\") && under(e, \"dependencies\", \"plugin\", \"plugins\", \"build\", \"project\");\n"
    "      if (!dep && configured(e) && e.getElementsByTagName(\"*\").getLength() == 0) {\n"
    "        String val = e.getTextContent().trim().replace(\"${os.detected.classifier}\", platform());\n"
    "        if ((name.equals(\"protoc\") || name.equals(\"protocVersion\")) && val.matches(\"[0-9][0-9A-Za-z.+-]*\"))\n"
    "          add(\"com.google.protobuf\", \"protoc\", val, \"exe\", platform());\n"
    "        String[] gav = val.split(\":\");\n"
    "        if ((name.equals(\"protocArtifact\") || name.equals(\"pluginArtifact\")) && gav.length >= 3 && gav.length <= 5)\n"
    "          add(gav[0], gav[1], gav[2], gav.length > 3 ? gav[3] : \"\", gav.length > 4 ? gav[4] : \"\");\n"
    "        continue; }\n"
    "      // a protoc plugin ascopes' plugin runs: an executable unless it says otherwise\n"
    "      if (name.equals(\"binaryMavenPlugin\")) { if (t.isEmpty()) t = \"exe\"; if (c.isEmpty()) c = platform(); }\n"
    "      // a report plugin the site plugin's <configuration> names is a plugin, not an artifact of this build\n"
    "      if (!dep && (!configured(e) || name.equals(\"plugin\") || name.equals(\"reportPlugin\"))) continue;\n"
    "      if (!dep && t.isEmpty() && name.equals(\"signature\")) t = \"signature\";\n"
    "      add(g, art, v, t, c); }\n"
    "    if (seen.isEmpty()) return;\n"
    "    Files.createDirectories(Paths.get(a[1]).toAbsolutePath().getParent());\n"
    "    Files.writeString(Paths.get(a[1]), \"<project><modelVersion>4.0.0</modelVersion><groupId>kiwi</groupId>\"\n"
    "        + \"<artifactId>kiwi-plugin-dependencies</artifactId><version>0</version><packaging>pom</packaging><dependencies>\\n\"\n"
    "        + deps + \"</dependencies></project>\\n\");\n"
    "    System.err.println(\"kiwi: \" + seen.size() + \" artifacts the build's plugins declare\"); } }\n";

#define MAVEN_HELP "org.apache.maven.plugins:maven-help-plugin:3.5.1"
#define MAVEN_RESOLVE "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:resolve"

/* A printf format of two arguments: the program's source, then the Maven
 * command. It runs only when a pom.xml of the tree declares a plugin's
 * dependencies or names an artifact in a plugin's configuration (one a
 * parent POM declares is not looked for: the effective
 * POM costs a Maven run); what it cannot resolve is said, and the install
 * goes on. */
#define MAVEN_PLUGIN_DEPS                                                                                    \
    "cat > " KIWI__SCRATCH "/KiwiPluginDeps.java <<'KIWI_JAVA_EOF'\n%sKIWI_JAVA_EOF\n"                       \
    "if find . -name pom.xml -not -path '*/target/*' -exec awk 'FNR == 1 { p = c = 0 } /<plugin>/ { p = 1 } "   \
    "/<configuration>/ { c = 1 } "                                                                             \
    "p && (/<dependencies>/ || (c && /<(artifactId|protoc|protocVersion|protocArtifact|pluginArtifact)>/)) "          \
    "{ f = 1 } /<\\/plugin>/ { p = 0 } /<\\/configuration>/ { c = 0 } END { exit !f }' {} + && "                         \
    "%s -B -q " MAVEN_HELP ":effective-pom -Doutput=" KIWI__SCRATCH "/effective-pom.xml >"                \
    KIWI__SCRATCH "/plugin-deps.log 2>&1 && [ -s " KIWI__SCRATCH "/effective-pom.xml ] && java " KIWI__SCRATCH \
    "/KiwiPluginDeps.java " KIWI__SCRATCH                                                                       \
    "/effective-pom.xml " KIWI__SCRATCH "/plugin-deps/pom.xml && [ -s " KIWI__SCRATCH "/plugin-deps/pom.xml ]; " \
    "then\n"                                                                                                   \
    "  %s -B -q -f " KIWI__SCRATCH "/plugin-deps/pom.xml " MAVEN_RESOLVE " >>" KIWI__SCRATCH                   \
    "/plugin-deps.log 2>&1 || { echo 'kiwi: not every dependency the build'\\''s plugins declare resolved:' >&2; " \
    "grep -m 3 -F '[ERROR]' " KIWI__SCRATCH "/plugin-deps.log >&2 || true; }\n"                                \
    "fi\n"

/* go-offline of a current dependency plugin: the one Maven's super POM
 * names (2.8 in Maven 3.8) resolves a reactor module's sibling (a SNAPSHOT
 * never published) from the repositories, and fails. */
#define MAVEN_GO_OFFLINE "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:go-offline"

/* Phase A's proxy (HTTPS_PROXY, http://HOST:PORT) as the Maven user
 * settings' proxy, for every repository. A printf format. */
#define MAVEN_PROXY_SETTINGS                                                                                 \
    "case \"${HTTPS_PROXY:-}\" in http://?*:?*)\n"                                                          \
    "  kiwi_p=${HTTPS_PROXY#http://}; kiwi_p=${kiwi_p%%%%/*}\n"                                               \
    "  mkdir -p /kiwi/home/.m2 && printf '<settings><proxies><proxy><id>kiwi</id><active>true</active>"     \
    "<protocol>http</protocol><host>%%s</host><port>%%s</port></proxy></proxies></settings>\\n' "            \
    "\"${kiwi_p%%:*}\" \"${kiwi_p##*:}\" >/kiwi/home/.m2/settings.xml;;\n"                                 \
    "esac\n"

/* What Maven says when it could not resolve an artifact, a plugin, a
 * parent or a build extension (an extended regular expression). */
#define MAVEN_UNRESOLVED                                                                                     \
    "Could not resolve dependencies|could not be resolved|Could not transfer artifact|Could not find artifact|" \
    "Unresolveable build extension|Non-resolvable (parent|import) POM|Plugin .* not found"

/* Phase A has the poms only, and Surefire resolves its test provider only
 * when there are tests: an empty test class per module for the warm-up
 * (outside the dependency locations: not in the snapshot), in a package of
 * its own: a build that compiles with Error Prone and -Werror (google/gson)
 * fails a class of the default package (DefaultPackage), and with its
 * testCompile failed the module's tests never run. No file of Kiwi's has
 * the license header a build may demand of every file (Apache RAT in every
 * Apache Commons build, license-maven-plugin), so the warm-up skips those
 * checks (rat.skip, license.skip): Maven still loads their plugins, with
 * their dependencies, and a check failed at validate would stop the
 * module's build before anything else resolved. A module that builds
 * with protobuf-maven-plugin gets an empty message in a .proto of its
 * main and test sources too, in src/{main,test}/protobuf: ascopes' plugin
 * (which reads that folder and src/{main,test}/proto) fails a module
 * without one (gson's proto module), and xolstice's, which does not, has
 * its protoc resolved by the plugin dependencies' step. A printf format
 * (add_jvm_step's format): "%%" is the shell's "%". */
#define MAVEN_TEST_STUBS                                                                                     \
    "find . -name pom.xml -not -path '*/target/*' | while read -r m; do d=${m%%/pom.xml}/src/test/java/kiwi/warmup; " \
    "mkdir -p \"$d\" && printf 'package kiwi.warmup;\\n\\npublic class KiwiWarmUpTest {}\\n' > \"$d/KiwiWarmUpTest.java\"; " \
    "if grep -q protobuf-maven-plugin \"$m\"; then for s in Main Test; do p=${m%%/pom.xml}/src/$(echo $s | "  \
    "tr MT mt)/protobuf; mkdir -p \"$p\" && printf 'syntax = \"proto3\";\\n\\npackage kiwi.warmup;\\n\\noption "     \
    "java_package = \"kiwi.warmup.proto\";\\n\\nmessage KiwiWarmUp%%s {}\\n' $s > \"$p/kiwi_warm_up_$s.proto\"; "   \
    "done; fi; done\n"

/* The lifecycle phase Phase A's warm-up runs to: `test`, or the later one
 * the test command's Maven asks for: `package`, or `verify` for the
 * integration-test phases, verify, install and deploy (the warm-up never
 * installs into the local repository). Plugins bound to those phases (a
 * format check, a packaging or API-compatibility plugin) resolve what they
 * need only when they run. Only a word of a simple command whose program
 * is mvn or mvnw counts, read as the runtime of a command is (through
 * VAR=value, env, exec, time, `sh ./mvnw`, sh -c strings). */
static const char *
maven_warm_phase (const char *command)
{
    static const char *const maven[] = { "mvn", "mvnw", NULL };
    static const char *const package[] = { "package", NULL };
    static const char *const verify[] = { "pre-integration-test", "integration-test", "post-integration-test",
                                          "verify", "install", "deploy", NULL };
    if (kiwi_command_runs_with (command, maven, verify))
        return "verify";
    return kiwi_command_runs_with (command, maven, package) ? "package" : "test";
}

int
kiwi__detect_maven (kiwi__inspect_ctx *ctx, const char *dir, bool is_root, kiwi__steps *s, kiwi_error_t *err)
{
    const char *root = kiwi__ctx_root (ctx);
    if (!kiwi__has_in (root, dir, "pom.xml"))
        return 0;
    bool wrapper = kiwi__has_in (root, dir, "mvnw");
    const char *mvn = wrapper ? "sh ./mvnw" : "mvn";
    const char *phase = maven_warm_phase (kiwi__ctx_command (ctx));
    char summary[96];
    snprintf (summary, sizeof summary, "%s -B dependency:go-offline + %s warm-up", wrapper ? "./mvnw" : "mvn", phase);
    /* Maven 3.9's own transport (a wrapper's Maven) reads no proxy from
     * the JVM's properties: Phase A's proxy goes into the user settings
     * too. dependency:go-offline resolves the declared dependencies and
     * plugins; Maven resolves plugins' own dependencies and the test
     * provider only when they run, so the lifecycle runs once up to `test`
     * or the later phase the test command asks for (its failures do not
     * fail the install: the code may be what the task fixes). What
     * go-offline could not resolve fails the install only when
     * the warm-up could not resolve something either: a plugin of another
     * phase (a site or release plugin) the tests never run does not. Then
     * the build output is removed and Maven is told to stay offline. */
    return add_jvm_step (s, KIWI_ECO_MAVEN, dir, summary, wrapper ? "pom.xml, mvnw" : "pom.xml", err,
                         MAVEN_PROXY_SETTINGS "kiwi_go=0\n"
                         "%s -B -q " MAVEN_GO_OFFLINE " >" KIWI__SCRATCH "/go-offline.log 2>&1 || kiwi_go=$?\n"
                         MAVEN_PLUGIN_DEPS MAVEN_TEST_STUBS
                         "%s -B -q -fn -Dmaven.test.failure.ignore=true -Drat.skip=true -Dlicense.skip=true %s >" KIWI__SCRATCH
                         "/warm-up.log 2>&1 || true\n"
                         "if [ \"$kiwi_go\" != 0 ]; then\n"
                         "  if grep -q -E '" MAVEN_UNRESOLVED "' " KIWI__SCRATCH "/warm-up.log; then\n"
                         "    cat " KIWI__SCRATCH "/go-offline.log >&2; exit \"$kiwi_go\"\n"
                         "  fi\n"
                         "  echo 'kiwi: dependency:go-offline could not resolve everything, and the test warm-up "
                         "resolved what it runs; left out:' >&2\n"
                         "  grep -m 5 -F '[ERROR]' " KIWI__SCRATCH "/go-offline.log >&2 || true\n"
                         "fi\n"
                         "%s -B -q -fn clean >>" KIWI__SCRATCH "/warm-up.log 2>&1 || true\n"
                         "mkdir -p /kiwi/home/.m2 && printf '<settings><offline>true</offline></settings>\\n' "
                         "> /kiwi/home/.m2/settings.xml\n",
                         mvn, maven_plugin_deps_source, mvn, mvn, mvn, phase, mvn);
}

static const char gradle_resolve[] =
    "allprojects {\n"
    "  task kiwiResolveDependencies {\n"
    "    doLast {\n"
    "      configurations.findAll { it.canBeResolved }.each { c ->\n"
    "        try { c.resolve() }\n"
    "        catch (org.gradle.api.artifacts.ResolveException e) { throw e }\n"
    "        catch (Exception e) { logger.warn(\"kiwi: ${project.path} ${c.name}: ${e.message}\") }\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

int
kiwi__detect_gradle (kiwi__inspect_ctx *ctx, const char *dir, bool is_root, kiwi__steps *s, kiwi_error_t *err)
{
    const char *root = kiwi__ctx_root (ctx);
    static const char *const files[] = { "build.gradle", "build.gradle.kts", "settings.gradle", "settings.gradle.kts",
                                         NULL };
    const char *found = NULL;
    for (size_t i = 0; files[i] && !found; i++)
        if (kiwi__has_in (root, dir, files[i]))
            found = files[i];
    if (found == NULL)
        return 0;
    bool wrapper = kiwi__has_in (root, dir, "gradlew");
    const char *g = wrapper ? "sh ./gradlew" : "gradle";
    char summary[96], why[96];
    snprintf (summary, sizeof summary, "%s resolve all configurations", wrapper ? "./gradlew" : "gradle");
    snprintf (why, sizeof why, "%s%s", found, wrapper ? ", gradlew" : "");
    /* every resolvable configuration of every project is resolved (the
     * dependencies task only reads metadata), then the build output and the
     * project's cache are removed; Gradle is told to stay offline by an init
     * script in GRADLE_USER_HOME. */
    return add_jvm_step (s, KIWI_ECO_GRADLE, dir, summary, why, err,
                         "cat > " KIWI__SCRATCH "/resolve.gradle <<'KIWI_GRADLE_EOF'\n%sKIWI_GRADLE_EOF\n"
                         "%s --no-daemon -q -I " KIWI__SCRATCH "/resolve.gradle kiwiResolveDependencies\n"
                         "%s --no-daemon -q clean >" KIWI__SCRATCH "/clean.log 2>&1 || true\n"
                         "rm -rf .gradle\n"
                         "mkdir -p /kiwi/home/.gradle/init.d && printf 'gradle.startParameter.offline = true\\n' "
                         "> /kiwi/home/.gradle/init.d/kiwi-offline.gradle\n",
                         gradle_resolve, g, g);
}
