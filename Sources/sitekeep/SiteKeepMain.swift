import SiteKeepCommandLine

@main
struct SiteKeepMain {
    static func main() async {
        await CommandLineTool.main()
    }
}
