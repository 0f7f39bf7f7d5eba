internal import SiteKeepCrypto
public enum CommandLineTool { public static func main() async {} }
