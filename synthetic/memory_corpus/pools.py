"""The pools the memory corpus draws from: names (first names, surnames, place-name parts,
organisation kinds), per-entity cues (relations, occupations, descriptors, place kinds,
regions and roles, organisation descriptors and roles), events and filler sentences."""

from __future__ import annotations

# --- name pools ------------------------------------------------------------------------------

MALE = """James John Robert William Thomas Charles George Henry Edward Arthur Walter Albert
Frederick Harold Samuel Daniel Joseph Peter Richard Francis Hugh Martin Simon Philip Victor Oscar
Felix Julian Leonard Lewis Alfred Ernest Edwin Ralph Roger Gilbert Herbert Howard Stephen Andrew
Matthew Nathan Oliver Isaac Jacob Benjamin Adam David Paul Mark Anthony Vincent Lawrence Edgar
Rupert Cecil Percy Horace Wilfred Ambrose Bernard Clement Conrad Dominic Emil Gordon Ivan Jasper
Magnus Miles Neville Owen Patrick Quentin Rufus Silas Tobias Warren Alan Basil Colin Dennis Eric
Frank Gerald Jack Kenneth""".split()
FEMALE = """Mary Anne Elizabeth Margaret Alice Emily Charlotte Harriet Catherine Eleanor Florence
Grace Helen Isabel Jane Julia Louisa Lucy Martha Matilda Rose Sarah Sophia Victoria Agnes Beatrice
Clara Dorothy Edith Ellen Emma Frances Hannah Ida Irene Laura Lydia Mabel Maud Nora Olive Phoebe
Rachel Ruth Susan Violet Winifred Adelaide Amelia Caroline Cecily Constance Esther Evelyn Hester
Jessie Josephine Leonora Marian Millicent Miriam Rosalind Sybil Theodora Ursula Vera Zoe Ada Bertha
Cora Flora Greta Hazel Iris Lillian Joan Kate Nancy Paula Sylvia""".split()
SURNAMES = """Abbott Ainsworth Aldridge Archer Ashby Atkins Bagley Bailey Barlow Barnes Barrett
Baxter Beckett Bennett Bishop Blackwood Bolton Bowen Bradley Bramley Brewer Briggs Brooks Bryant
Buckley Burgess Burton Butler Calder Carver Chambers Chandler Chapman Clayton Cole Collins Conway
Cooper Corbett Cox Crane Crawford Cross Dalton Davies Dawson Dean Dixon Doyle Drake Dudley Dunmore
Durham Eastman Ellis Elliott Emerson Fairfax Farley Faulkner Fenton Fielding Fisher Fleming Fletcher
Ford Forster Fowler Foster Franklin Fraser Garrett Gibbs Gilbert Goddard Gordon Graham Granger
Greaves Gregory Griffin Hale Hall Hammond Harding Harper Harris Hartley Hastings Hawkins Hayes
Heath Henderson Hewitt Hill Hobbs Holden Holland Holt Hopkins Howell Hudson Hughes Hunt Hurst
Ingram Irving Jarvis Jenkins Jennings Kemp Kendall Kent Kerr Knight Lambert Lane Lawson Leach Lester
Lewis Lindsay Lloyd Lowe Lucas Lyons Mallory Manning Marsh Marshall Mason Matthews Maxwell Mercer
Merritt Miles Mills Milton Mitchell Moore Morgan Morley Morris Morton Murray Nash Neal Newman
Newton Nichols Norris Norton Oakley Osborne Owens Palmer Parker Parsons Payne Pearce Pearson
Pemberton Perkins Phelps Pierce Porter Potter Pratt Preston Price Quinn Radcliffe Ramsey Randall
Rawlings Read Reeves Reynolds Rhodes Richards Rivers Roberts Robinson Rowe Russell Salter Sanders
Saunders Sawyer Sellers Sharp Shaw Shelby Shepherd Sherwood Simmons Slater Spencer Stafford Stanley
Steele Stevens Stone Stratton Sutton Swift Talbot Tanner Taylor Thornton Tucker Turner Underwood
Vaughan Vernon Wade Walker Wallace Walsh Ward Warner Watkins Watson Weaver Webb Webster Wells
Wheeler Whitaker Whitmore Wilkins Willis Winslow Wood Woodward Wright Wyatt Yates Young""".split()
PLACE_HEADS = """Ash Bram Carl Dun Elm Fal Glen Hart Ips Kel Lang Mar Nor Oak Pen Rad Sel Thorn
Ver Wal Yar Ald Brack Cald Dray Fern Gos Hol Kings Lind Mill Ned Ox Pol Rook Stan Tal Wex Wyn Bex
Cor Dart Eg From Grant Hay Ick Lan Mor Nant Ort Pres Rich Shap Tod Ux Wem Amble Bel Clay Dover Ever
Fox Gil Hals Kes Lea Marl New Orm Pad Red Sand Tam Wick Bar Crow Dal Ely Fair Gold Haver Kir Lox
Mal North Pit Rams Silver Strat Tew Whit Wool Ayles Black Chal""".split()
PLACE_TAILS = """ford bury wick ham ton mouth field stead by well brook combe hurst ley dale minster
worth chester port haven bridge gate holm thorpe water moor cliff stow marsh wood borough den ness
wold more fell ridge vale mere""".split()
SURNAME_SET = frozenset(SURNAMES)
ORG_KINDS = """Academy Foundry Gazette Bank Society Company Observatory Hospital Press Shipyard
Theatre Library College Mill Brewery Museum Orchestra Institute""".split()

# --- cue pools (each value used by at most one entity of a document) --------------------------

RELATIONS = [("mentor", "mentor"), ("rival", "rival"), ("patron", "patron"),
             ("apprentice", "apprentice"), ("business partner", "business partner"),
             ("closest friend", "closest friend"), ("neighbour", "neighbour"),
             ("landlord", "landlady"), ("benefactor", "benefactor"),
             ("correspondent", "correspondent"), ("travelling companion", "travelling companion"),
             ("brother-in-law", "sister-in-law"), ("nephew", "niece"), ("cousin", "cousin"),
             ("godfather", "godmother"), ("guardian", "guardian"), ("employer", "employer"),
             ("creditor", "creditor"), ("biographer", "biographer"), ("husband", "wife"),
             ("former pupil", "former pupil"), ("old schoolfellow", "old schoolfellow")]
OCCUPATIONS = """engraver shipwright cartographer printer bookbinder clockmaker surveyor apothecary
glassblower stonemason architect physician lawyer banker merchant organist painter sculptor botanist
astronomer chemist schoolmaster magistrate editor engineer silversmith weaver brewer locksmith
bookseller photographer translator composer playwright novelist poet carpenter tanner vintner
pharmacist geologist librarian mathematician jeweller auctioneer""".split()
DESCRIPTORS = [
    "a former sailor", "a veteran of the coastal wars", "a devout Quaker", "a notorious gambler",
    "a keen amateur astronomer", "an early supporter of the railway", "a collector of old maps",
    "a native of the eastern provinces", "the youngest of eleven children",
    "a gifted chess player", "an outspoken reformer", "a skilled violinist", "a former soldier",
    "a tireless letter writer", "a lifelong teetotaller", "a convert to Catholicism",
    "a survivor of the great fire", "a member of the town council", "a passionate gardener",
    "a heavy drinker", "a famously poor speller", "a founder of the local choir",
    "an avid angler", "a refugee from the southern wars", "a celebrated wit",
    "a former actor", "a noted beekeeper", "a skilled horse rider", "a friend of the governor",
    "a stern Methodist", "a distant relation of the bishop", "a champion rower",
    "a collector of fossils", "a self-taught linguist", "an amateur boxer",
    "a famously generous host", "a former smuggler", "an expert on old coins",
    "a habitual debtor", "a retired ship's captain"]
PLACE_KINDS = ["harbour town", "market town", "mill town", "cathedral city", "mining village",
               "river port", "garrison town", "spa town", "fishing village", "university town",
               "county town", "wool town", "hill village", "border town", "canal town"]
PLACE_REGIONS = ["on the northern coast", "in the eastern hills", "near the border",
                 "on the southern plain", "in the lake country", "at the mouth of the river",
                 "in the western valleys", "on the edge of the moors", "by the old canal",
                 "beneath the chalk downs", "in the fen country", "on the island's east shore"]
PLACE_ROLES = ["where {he} was born", "where {he} went to school",
               "where {he} opened {his} first workshop", "where {he} spent {his} last years",
               "where {he} was married", "where {his} family had long owned land",
               "where {he} first found work", "where {he} was briefly imprisoned",
               "where {he} is buried", "where {he} gave {his} first lecture"]
ORG_DESCRIPTORS = ["founded by local merchants", "the oldest of its kind in the province",
                   "rebuilt twice after fires", "funded by a wealthy widow",
                   "run for decades by a single family", "famous for its annual prize",
                   "housed in a former monastery", "notorious for its debts",
                   "admired across the country", "set up by a group of exiles"]
ORG_ROLES = ["first employed {him}", "published {his} first pamphlet", "elected {him} to its board",
             "awarded {him} a silver medal", "rejected {his} early application",
             "commissioned {his} most famous work", "paid for {his} journey abroad",
             "dismissed {him} after a quarrel", "trained {him} in {his} youth",
             "bought the rights to {his} designs"]

# --- event and filler pools ------------------------------------------------------------------

PERSON_EVENTS = [
    "lent {him} the money for {his} first workshop", "introduced {him} to the guild",
    "quarrelled with {him} over a debt", "taught {him} to read music",
    "sailed with {him} to the southern islands", "nursed {him} through a long fever",
    "bought several of {his} early works", "wrote to {him} almost every week",
    "persuaded {him} to move to the capital", "witnessed {his} first contract",
    "opposed {his} election to the council", "shared {his} lodgings for three years",
    "accompanied {him} on a survey of the coast", "sued {him} over a broken agreement",
    "helped {him} finish {his} first book", "warned {him} against the new venture",
    "later edited {his} letters", "settled {his} debts without telling {him}",
    "painted a portrait of {him}", "took over {his} business for a time",
    "spread rumours about {his} finances", "found {him} a post at the harbour office",
    "introduced {him} to {his} future publisher", "left {him} a small legacy",
    "travelled with {him} to the northern fairs", "stood by {him} during the trial",
    "drew up the plans for {his} new house", "never forgave {him} for the lawsuit",
    "kept a diary of their years together", "challenged {his} claims in print"]
PLACE_EVENTS = ["was badly damaged by floods in {year}", "grew quickly after the railway arrived",
                "held a large fair every autumn", "lost much of its trade to the capital",
                "suffered an outbreak of cholera in {year}", "was famous for its lace",
                "had a population of a few thousand at the time", "gained a new town hall in {year}",
                "was linked to the capital by a new road in {year}",
                "remained important to {him} throughout {his} life"]
ORG_EVENTS = ["closed for two years after a fire", "moved to larger premises in {year}",
              "was sold to new owners in {year}", "doubled in size within a decade",
              "struggled to pay its workers that winter", "opened a branch in the capital",
              "lost its royal charter in {year}", "was taken over by a rival in {year}"]
SUBJECT_EVENTS = [
    "took on {his} first apprentice", "fell seriously ill and stopped working for a year",
    "travelled abroad for the first time", "published a short treatise on {topic}",
    "was elected to the town council", "lost most of {his} savings in a bank failure",
    "began keeping a detailed diary", "moved into a larger house near the market",
    "gave a series of public lectures on {topic}", "received {his} first major commission",
    "was briefly arrested after a dispute with a customer", "started a small evening school",
    "turned down an offer of a post abroad", "spent several months studying {topic}",
    "won a prize for an essay on {topic}", "was injured in a carriage accident",
    "bought a share in a merchant ship", "began corresponding with scholars abroad"]
TOPICS = ["river navigation", "the measurement of time", "coastal erosion", "the printing of maps",
          "the chemistry of dyes", "church bells", "the drainage of marshes", "local folk songs",
          "the care of orchards", "the history of the guilds", "weights and measures",
          "the design of lighthouses", "the breeding of sheep", "winter storms"]
FILLER = [
    "That year the harvest failed across much of the province.",
    "Trade along the river slowed during the long winter of {year}.",
    "Prices for grain and timber rose sharply after {year}.",
    "The old wooden bridge was rebuilt in stone around this time.",
    "Few of {his} letters from this period survive.",
    "The work was slow, and payment often came months late.",
    "Contemporary reports describe {him} as quiet but stubborn.",
    "By {year} {he} was well known in the district.",
    "Little is known about {his} life in these years.",
    "The country was then in the middle of a long economic depression.",
    "{He} worked long hours and rarely took a day of rest.",
    "A new road made travel between the towns much easier.",
    "The winter of {year} was remembered as one of the coldest of the century.",
    "{His} income during these years was modest but steady.",
    "Several of {his} notebooks from these years are now in a private collection.",
    "The arrival of the telegraph changed the pace of business.",
    "{He} later described this as the happiest time of {his} life.",
    "Storms in {year} wrecked several ships along the coast."]
